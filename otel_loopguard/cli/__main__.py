"""``python -m otel_loopguard.cli``: the same as the ``otel-loopguard`` command."""

import sys

from . import main

sys.exit(main())
