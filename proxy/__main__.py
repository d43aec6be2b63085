"""`python -m proxy` is the `ctxproxy` command."""

import sys

from proxy.cli import main

sys.exit(main())
