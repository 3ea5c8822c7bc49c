"""`python -m gateway_local [--template template.yaml]`: what `make run` starts."""

import argparse
import sys

from gateway_local.server import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m gateway_local", description=__doc__)
    parser.add_argument("--template", default="template.yaml", help="the SAM template to serve")
    sys.exit(main(parser.parse_args().template))
