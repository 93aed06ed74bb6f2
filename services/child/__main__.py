"""`python -m services.child IN_FD OUT_FD DEVICE MEM_MB FILE_MB`: one child, started as a command
(services.child.boot says what it does)."""

from services.child.boot import main

if __name__ == "__main__":
    main()
