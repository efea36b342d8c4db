"""`python -m inspector`: as the `network-inspector` command. Without a sub-command it opens
the desktop app (`python -m inspector img.png --model resnet50`); `python -m inspector
analyse ...` and the other commands work too. inspector.cli imports nothing heavy first."""

from inspector.cli import main

raise SystemExit(main())
