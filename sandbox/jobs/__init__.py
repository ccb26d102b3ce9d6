"""Jobs, one layer above the runtime: sweeps of resumable jobs (``sweep``) run in this process, on
local worker processes (``pool``, ``backends``) or on Ray, their results kept one verifiable file
per job (``store``), their cost said before they start (``costs``), and replications by base seed
(``seeds``)."""
