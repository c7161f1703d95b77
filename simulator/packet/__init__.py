"""The packet backend (``packet``, issue 24): the Dispatcher's runs carried by ns-3.

``fabric`` (the network as data, pure), ``options`` (a scenario's ``packet`` settings, pure),
``engine`` (imports ns-3 and compiles ``glue.cpp``: only when a run starts), ``run`` (the
loop between ns-3 and the Dispatcher), ``backend`` (the ``packet`` backend of the registry,
:mod:`railbed.backend`). Importing this package imports no ns-3.
"""
