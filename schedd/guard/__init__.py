"""Which hosts and addresses schedd may connect to on a tenant's behalf (the SSRF guard): URL
rules (`ssrf.py`), bounded DNS lookups (`dns.py`) and the checked-address resolver the callers
connect through (`targets.py`). Used by the API (checking targets at create) and by delivery."""
