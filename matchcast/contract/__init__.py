"""The topic API as others see it: what is published where, in which shape, and its documents.

- :mod:`~matchcast.contract.channels`: the channels (topic, QoS, retain) the AsyncAPI
  document lists;
- :mod:`~matchcast.contract.status`: the replayer status payload;
- :mod:`~matchcast.contract.wire_examples`: one example payload per message;
- :mod:`~matchcast.contract.wire_schema`: the schema snapshots and fixtures each version keeps;
- :mod:`~matchcast.contract.asyncapi`: the AsyncAPI 3.0 document;
- :mod:`~matchcast.contract.wire_docs`: ``python -m matchcast.contract.wire_docs``, which writes
  docs/wire-format.md, docs/asyncapi.yaml and the snapshots from the code.

The events themselves are :mod:`events`; this package describes them, it does not define them.
"""
