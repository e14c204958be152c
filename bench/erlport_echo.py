"""The PyPI ErlPort reader (emqx-erlport's ``Port``) as a baseline for bench/run.exs.

Terms: ``{:s, binary}`` -> answers ``:k`` (Elixir -> Python); ``{:g, n}`` -> answers a binary of
``n`` bytes (Python -> Elixir). Needs ``pip install emqx-erlport`` (``make bench`` does).
"""

from __future__ import annotations

from emqx.erlport.erlproto import Port
from emqx.erlport.erlterms import Atom


def main() -> None:
    port = Port(packet=4, use_stdio=False, descriptors=(3, 4))
    while True:
        try:
            tag, value = port.read()
        except EOFError:
            return
        if tag == Atom(b"s"):
            port.write(Atom(b"k"))
        else:
            port.write(bytes(value))


if __name__ == "__main__":
    main()
