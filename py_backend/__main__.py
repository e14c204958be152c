"""``python -m py_backend``: serve requests on fd 3, reply on fd 4 (PROTOCOL.md section 1)."""

import sys

from py_backend.request_loop import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
