"""Per-node method dispatch over the formula IR, one mechanism for every walk.

A visitor names a method ``visit_<NodeClass>`` per kind of node; ``visit(e)``
calls the method of ``e``'s class, or of the nearest base class that has one (so
``visit__Bin`` can serve Add, Sub, ... at once, and ``visit_Expr`` is a default).
The lookup is resolved once per (visitor class, node class).  This module knows no
node class, so the printers that the IR itself uses (LaTeX, in its error messages)
can be visitors without importing the IR.
"""
from __future__ import annotations


class Visitor:
    """Subclass and define ``visit_<NodeClass>(self, e, *args)`` methods."""

    _rules: dict = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._rules = {}  # per visitor class: node class -> unbound method

    def _rule(self, node_cls):
        rule = self._rules.get(node_cls)
        if rule is None:
            for base in node_cls.__mro__:
                rule = getattr(type(self), "visit_" + base.__name__, None)
                if rule is not None:
                    break
            else:
                raise NotImplementedError(f"{type(self).__name__} has no rule for {node_cls.__name__}")
            self._rules[node_cls] = rule
        return rule

    def visit(self, e, *args):
        return self._rule(type(e))(self, e, *args)

    def handles(self, e) -> bool:
        """Whether some rule of this visitor applies to ``e``."""
        try:
            self._rule(type(e))
        except NotImplementedError:
            return False
        return True
