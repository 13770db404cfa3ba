"""The data stage: the acceptance policy (``data.policy``), the Verifier and Lean backends
(``data.verifier``), and the labelled-corpus build (``python -m data.build``)."""
