"""The data stage: label candidate proofs with Lean into a corpus (``python -m data.build``).

The Lean library it uses (acceptance policy, Verifier, backends, stand-ins) is shared and lives in
``leanloop.lean``."""
