import pathlib
import sys

# The guest's modules (app, decision) are imported as componentize-py's
# `-p examples/guest-app-py` makes them importable.
sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
