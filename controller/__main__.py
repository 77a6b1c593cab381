import sys

from tablectl.controller.cli import main

sys.exit(main())
