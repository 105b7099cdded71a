"""The state machine (`machine.StateMachine`) and its apply handlers, one module per resource.
Apply functions are the only writers of the store's state."""

from schedd.store.apply.machine import StateMachine

__all__ = ["StateMachine"]
