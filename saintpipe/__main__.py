from saintpipe.cli import main

raise SystemExit(main())
