"""`python -m proxy` is the `ctxproxy` command."""

import sys

from proxy.cli.main import main

sys.exit(main())
