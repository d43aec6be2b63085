"""`ctxproxy demo` (placeholder until the demo lands)."""

from __future__ import annotations

import argparse


def add_demo_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    return None
