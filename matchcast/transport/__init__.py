"""How matchcast talks MQTT, and nothing else: no command line, no page, no load test.

- :mod:`~matchcast.transport.connection`: what both clients connect to: the broker URL with its
  credentials and TLS options (the one place an ``ssl.SSLContext`` is built), a broker list,
  the protocol, the last will;
- :mod:`~matchcast.transport.mqtt`: the aiomqtt (paho) client, and
  :mod:`~matchcast.transport.aiomqtt_private`: what it needs of aiomqtt and paho beyond their
  public API, in one place, each use pinned by a test;
- :mod:`~matchcast.transport.fastmqtt`: the fast client, built in
  :mod:`~matchcast.transport.fast`: one QoS state machine over a codec per MQTT version (5 on
  the ``mqtt5`` package, 3.1.1 on :mod:`~matchcast.transport.mqtt311`);
- :mod:`~matchcast.transport.failover`: the broker list and the one failover schedule both
  clients follow;
- :mod:`~matchcast.transport.clients`: ``--client``, picking one of the two;
- :mod:`~matchcast.transport.broker`: the embedded broker (amqtt).

Each MQTT library is imported by its own modules only (aiomqtt by ``mqtt`` and
``aiomqtt_private``, paho by ``aiomqtt_private``, mqtt5 by ``fast.codec5``, amqtt by
``broker``). Nothing is imported here, so that importing one client
does not import the other.
"""
