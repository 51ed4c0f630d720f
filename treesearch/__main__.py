import sys

from treesearch.cli import main

sys.exit(main())
