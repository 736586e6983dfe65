"""The fast MQTT client's parts; its one public name is
:class:`matchcast.transport.fastmqtt.FastClient`, whose module docstring says which part does
what. Nothing is imported here."""
