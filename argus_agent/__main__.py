"""`python -m argus_agent ...` is the `argus` CLI (`python -m argus_agent demo` runs the built-in example)."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="argus")
