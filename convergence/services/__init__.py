"""The use cases: what the API and the CLI ask of the engine, each a locked transaction (or a
read) on the runtime's store, taking plain input and returning plain data or the store's views.

Callers: ``convergence.api`` (the routes), ``convergence.cli`` (the embedded client,
``convergence.cli.local``, and the commands that drive work in this process), the worker
process (``convergence.workers``: the webhook delivery task) and the tests. This package
imports the engine and the ports, never the store, the dispatchers or the runtime: the use
cases are written against the :class:`~convergence.services.context.Runtime` protocol. Errors
in user input leave as ``TemplateError`` with every problem and its path; the other refusals
are ``convergence.errors``'s.

Modules, by what they hold:

- :mod:`~convergence.services.stacks`: the requests that change a stack (create, update,
  delete, cancel, reset, abandon, mark a resource's health).
- :mod:`~convergence.services.queries`: reading stacks, resources and events (and finding the
  stack a request names, locked or not).
- :mod:`~convergence.services.running`: following a request's work to its end from this
  process (embedded mode: running it here), and telling abandoned work apart.
- :mod:`~convergence.services.holds`: the stacks this process drives, held in the database.
- :mod:`~convergence.services.templates`: validating templates and accepting a request's
  template content.
- :mod:`~convergence.services.admission`: stack names and size limits, checked before parsing.
- :mod:`~convergence.services.inputs`: what a stack was made from (descriptions, parameters).
- :mod:`~convergence.services.pages`: the stack list's filters, order and pages.
- :mod:`~convergence.services.preview`: what a create or an update would do.
- :mod:`~convergence.services.webhooks`: subscriptions and the delivery of notifications;
  :mod:`~convergence.services.webhook_destinations`, the addresses they may reach, and
  :mod:`~convergence.services.webhook_client`, the client that connects only to those.
- :mod:`~convergence.services.operations`: health, figures and the service list.
- :mod:`~convergence.services.heat_shapes`: Heat's answer shapes the use cases build
  (validate's parameters, the merged environment, the export blob).
"""
