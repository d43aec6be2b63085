"""`ctxproxy sessions list | show ID | watch` (placeholder until the sessions view lands)."""

from __future__ import annotations

import argparse


def add_sessions_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    return None
