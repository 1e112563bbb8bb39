"""``python -m wasmctrl wit``: prints the directory of the contract's WIT
files, for ``componentize-py -d``."""

import sys

from . import wit_dir

if sys.argv[1:] == ["wit"]:
    print(wit_dir())
else:
    sys.exit("usage: python -m wasmctrl wit")
