"""Build and deploy tools: `make package` (tools.package), `make deploy` (tools.deploy).

Run from the repository root with the project's virtualenv. Never shipped in the
Lambda zip.
"""
