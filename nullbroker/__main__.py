import sys

from .app.command import main

sys.exit(main())
