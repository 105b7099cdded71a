"""HTTP callback delivery: SSRF guard, Standard Webhooks signing, attempt outcomes, callers."""
