import sys

try:
    from ackspec.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing: one line, exit 130, as from main()
    print("ackspec: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
