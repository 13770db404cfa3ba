"""Stand-ins that speak the real protocols but answer only with real recorded Lean output.

- ``repl``: an executable that speaks the Lean REPL's JSON protocol over stdin/stdout, so
  lean-interact's own ``LeanServer`` / ``AutoLeanServer`` drive it exactly as they drive the real
  ``repl`` binary (process start, blank-line framing, timeouts, kills, restarts, reply parsing).
- ``kimina_server``: an aiohttp server with the Kimina Lean Server's ``/verify`` API.

Both replay recordings from ``../shared/data/lean_repl``; a request nobody recorded gets an explicit
"no recorded Lean answer" refusal (mapped to ``UNAVAILABLE``), never an invented verdict. Both can
inject faults keyed on a recorded command (crash, hang, garbage), to show that nothing is lost.
"""
