import sys

from .demo import main

if __name__ == "__main__":
    if sys.argv[1:2] not in (["demo"], []):
        print("usage: python -m argus_agent demo", file=sys.stderr)
        sys.exit(2)
    sys.exit(main())
