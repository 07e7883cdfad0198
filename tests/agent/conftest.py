import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from argus_agent.examples import EXAMPLES


@pytest.fixture(autouse=True)
def argus_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def history(tmp_path):
    from argus_agent.history import History

    h = History(tmp_path / "history.db")
    yield h
    h.close()


@pytest.fixture
def examples():
    return EXAMPLES


class FakeOpenAI:
    """An OpenAI chat-completions server on 127.0.0.1 (port 0) that answers from a script.

    Each scripted reply is a string (the assistant's content), {"hold": seconds, "content": ...} (answer late:
    for client timeouts) or {"status": code} (an HTTP error). Requests are kept for inspection."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body})
                reply = fake.replies.pop(0) if fake.replies else '{"kind": "stop"}'
                if isinstance(reply, dict) and "status" in reply:
                    self.send_response(reply["status"])
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "scripted failure"}}')
                    return
                if isinstance(reply, dict):
                    time.sleep(reply["hold"])  # bounded server-side hold, longer than the client's timeout
                    reply = reply["content"]
                data = json.dumps({
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_openai():
    servers = []

    def make(replies):
        s = FakeOpenAI(replies)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()
