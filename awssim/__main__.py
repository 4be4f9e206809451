"""python -m awssim serve [--host 127.0.0.1] [--port N]"""

from __future__ import annotations

import argparse

from awssim.server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m awssim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser(
        "serve", help="serve moto plus awssim; prints the URL first, stops on SIGINT/SIGTERM"
    )
    serve_parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    serve_parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    if args.command == "serve":
        if not args.host.startswith("127.") and args.host not in ("localhost", "::1"):
            parser.error("awssim serves on the loopback interface only")
        serve(args.host, args.port)


if __name__ == "__main__":
    main()
