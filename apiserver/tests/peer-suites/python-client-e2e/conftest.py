# Makes the vendored suite importable as `kubernetes.e2e_test`, the name it
# imports itself by, without copying it into the installed package: the
# installed `kubernetes` package also searches ./kubernetes. The suite's
# YAML paths (`kubernetes/e2e_test/test_yaml/...`) are relative to this
# directory, which the runner makes the working directory.
import os

import kubernetes

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kubernetes")
if _HERE not in kubernetes.__path__:
    kubernetes.__path__.append(_HERE)
