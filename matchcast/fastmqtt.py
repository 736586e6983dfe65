"""The documented import path of the fast client: ``from matchcast.fastmqtt import FastClient``
(``--client fast`` names it in its help).

The code is :mod:`matchcast.transport.fastmqtt`; this module only re-exports its public name.
"""

from matchcast.transport.fastmqtt import FastClient

__all__ = ["FastClient"]
