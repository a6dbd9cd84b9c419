"""The tus 1.0.0 server of the tests: PyPI's resumable-upload (its `serve` command, unchanged),
with each answered request logged as a JSON line to LOG: method, path, the request's
Upload-Offset and Content-Length, the status. Usage: tus_server.py LOG serve [serve's options]."""
import json
import sys

from resumable_upload.cli import main
from resumable_upload.server import TusHTTPRequestHandler

log_path = sys.argv[1]


def log_message(self, format, *args):
    return


def log_request(self, code="-", size="-"):
    line = {
        "method": self.command,
        "path": self.path,
        "offset": self.headers.get("Upload-Offset"),
        "length": self.headers.get("Content-Length"),
        "checksum": self.headers.get("Upload-Checksum"),
        "status": int(getattr(code, "value", code)) if str(getattr(code, "value", code)).isdigit() else code,
    }
    with open(log_path, "a") as log:
        log.write(json.dumps(line) + "\n")


TusHTTPRequestHandler.log_message = log_message
TusHTTPRequestHandler.log_request = log_request
sys.exit(main(sys.argv[2:]))
