import sys

from kernelgym.cli import main

sys.exit(main())
