// Package python is not Go: invoices.py is the founding story (an
// invoice paid, summarized by a model once) written in Python with
// oncehook's Python client (clients/python), a web process and two
// Celery-like workers. Its Go test runs them against a real gateway.
package python
