from treesearch.cli import main

raise SystemExit(main())
