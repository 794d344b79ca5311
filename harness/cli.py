"""`curriculum-harness` command line."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="curriculum-harness", description="Run and plot curriculum scenarios.")


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
