# type: ignore
# ruff: noqa
"""What vulture (make lint: dead code in drainer/ and tools/) may not see used, each
with why. A name here is used where vulture does not look: by the Lambda runtime or
a console script, by a protocol of the standard library, or by the bench. A view
only the tests need lives in tests/support/views.py, not here.

Vulture reads this file as code that uses these names; it is never imported."""

_ = object()

# Entry points: the Lambda runtime calls the handler, the wheel's console scripts
# the commands (pyproject.toml).
_.lambda_handler
_.kubectl_plugin

# The standard library's protocols: http.client's answer (its headers' get_all, read
# by getheader; its chunk_left, read by its chunked body), io.RawIOBase's
# readable, logging's handler list, zipfile's entry attributes.
_.get_all
_.chunk_left
_.readable
_.handlers
_.external_attr
_.create_system
_.compress_type

# Fields read from AWS and kept in the record they parse (the instance's zone, the
# account an event names), the package manifest's installed distributions, and what
# a target-group wait found too short (logged as part of its extra).
_.availability_zone
_.account
_.distributions
_.short_grace

# The bench's node lookup (bench/child.py find-node) and docs tests
# (tests/deploy/test_deploy_readme.py: the reference's generated section).
_.find_node
_.section
