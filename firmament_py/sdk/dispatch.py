"""Registering a policy with pluggy, refusing implementations that cannot work, and calling
its hooks as cheaply as pluggy's rules allow.

pluggy finds a policy's hook implementations by their `hookimpl` mark and checks their names
and argument names against the specs. Some mistakes pass that check and would only show as a
policy that silently never answers; `register_policy` refuses them when the policy is loaded,
naming the policy, the hook and the argument:

* a parameter with a default, `*args` or `**kwargs` (pluggy fills none of them: the hook's
  arguments go by name to the parameters without a default that name them);
* a method defined without `self`, whose first argument would be taken as the instance;
* a method named like a hook (or nearly: a typo) that lacks the `hookimpl` mark.

Calling. A round asks 10^4-10^5 questions, and pluggy's dispatch is most of a call's cost; when
the policy has one plain implementation of a hook (no wrapper), asking it and then, if it
answers None, the defaults is exactly what pluggy would do, at a third of the cost
(`policy_caller`).
"""

from __future__ import annotations

import difflib
import inspect
import operator
from collections.abc import Callable

import pluggy

from firmament_py.sdk import hookspecs
from firmament_py.sdk.errors import PolicyError

__all__ = ["DEFAULTS_PLUGIN_NAME", "Caller", "defaults_caller", "policy_caller", "register_policy"]

DEFAULTS_PLUGIN_NAME = "firmament-defaults"
"""The name the built-in defaults are registered under; no policy may take it."""

Caller = Callable[[dict[str, object]], object]
"""Asks one hook, given its arguments by name."""

_SPEC_ARGUMENTS = {
    hook: tuple(inspect.signature(getattr(hookspecs, hook)).parameters)
    for hook in hookspecs.ALL_HOOKS
}


def register_policy(policy: object, name: str, defaults: object) -> pluggy.PluginManager:
    """A plugin manager with the hook specs, `policy` registered as `name`, then `defaults`.

    Raises PolicyError (naming the policy, the hook and the argument) for anything pluggy or
    the rules in the module docstring refuse.
    """
    if isinstance(policy, type):
        raise PolicyError(
            name, f"{policy.__name__} is a class; register an instance of it (or a module)"
        )
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(policy, name=name)
        manager.check_pending()
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise PolicyError(name, f"is not a valid policy plugin: {exc}") from exc
    for caller in manager.get_hookcallers(policy) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin is policy:
                problem = _implementation_problem(caller.name, impl.function)
                if problem is not None:
                    raise PolicyError(name, f"hook {caller.name}: {problem}", hook=caller.name)
    unmarked = _unmarked_hooks(policy, manager)
    if unmarked:
        raise PolicyError(name, unmarked)
    # Last and trylast: pluggy puts each new trylast implementation at the very end of the
    # calling order, so the defaults are asked after everything the policy implements, its
    # own trylast implementations included (registered first, they would not be).
    manager.register(defaults, name=DEFAULTS_PLUGIN_NAME)
    return manager


def _implementation_problem(hook: str, function: Callable[..., object]) -> str | None:
    """Why this implementation of `hook` would never be called as its author meant, or None."""
    spec = _SPEC_ARGUMENTS[hook]
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None  # a builtin or C function: pluggy's own check is all there is
    described = f"the hook's arguments are: {', '.join(spec) or 'none'}"
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            return (
                f"takes {star}{parameter.name}, which is never filled: name the arguments it "
                f"uses ({described})"
            )
        if parameter.default is not parameter.empty:
            why = "pluggy never passes" if parameter.name in spec else "the hook does not have"
            return (
                f"argument {parameter.name!r} has a default, which {why}: give hook arguments "
                f"no default ({described})"
            )
    raw = inspect.unwrap(getattr(function, "__func__", function))
    if inspect.ismethod(function) and not isinstance(raw, staticmethod | classmethod):
        first = next(iter(inspect.signature(raw).parameters), None)
        if first in spec:
            return (
                f"its first parameter {first!r} takes the instance, as `self` would: a method "
                "needs `self` first (or a @staticmethod)"
            )
    return None


def _unmarked_hooks(policy: object, manager: pluggy.PluginManager) -> str | None:
    """What is wrong with the policy's methods named like hooks (or nearly) without the
    `hookimpl` mark, which pluggy would never call; None if there are none."""
    exact: list[str] = []
    near: list[str] = []
    for attribute in dir(policy):
        if attribute.startswith("_") or not callable(getattr(policy, attribute, None)):
            continue
        if manager.parse_hookimpl_opts(policy, attribute) is not None:
            continue
        if attribute in _SPEC_ARGUMENTS:
            exact.append(attribute)
            continue
        close = difflib.get_close_matches(attribute, _SPEC_ARGUMENTS, n=1, cutoff=0.9)
        if close:
            near.append(f"{attribute} (did you mean {close[0]}?)")
    if exact:
        return (
            f"defines {', '.join(exact)} without marking it with "
            "firmament_py.sdk.hookimpl, so pluggy would never call it"
        )
    if near:
        return (
            f"defines {', '.join(near)}, which is no hook and would never be called: rename it "
            "or make it private (a leading underscore)"
        )
    return None


# ---------------------------------------------------------------------- calling


def _pluggy_call(hook_caller: Callable[..., object]) -> Caller:
    """Ask every implementation through pluggy."""

    def call(arguments: dict[str, object]) -> object:
        return hook_caller(**arguments)

    return call


def _positional_call(method: Callable[..., object], accepted: tuple[str, ...]) -> Caller:
    """Call `method` with the arguments named `accepted`, in that order, by position."""
    if not accepted:
        return lambda arguments: method()
    if len(accepted) == 1:
        (only,) = accepted
        return lambda arguments: method(arguments[only])
    pick = operator.itemgetter(*accepted)
    return lambda arguments: method(*pick(arguments))


def defaults_caller(method: Callable[..., object]) -> Caller:
    """Call one of the defaults' methods with the arguments its signature names, as pluggy
    would (the defaults take plain parameters, named after the hook's arguments)."""
    return _positional_call(method, tuple(inspect.signature(method).parameters))


def _no_answers(arguments: dict[str, object]) -> list[object]:
    return []


def policy_caller(hook: str, hook_caller: pluggy.HookCaller | None, defaults: object) -> Caller:
    """How to ask `hook` of a policy: directly when it has one plain implementation (asking
    the defaults after it if it answers None), through pluggy otherwise (wrappers, several
    implementations), and the defaults alone (or, for a notification, nobody) when the
    policy does not implement it. `hook_caller` is None in that last case."""
    if hook_caller is None:
        if hook in hookspecs.ANSWER_HOOKS:
            return defaults_caller(getattr(defaults, hook))
        return _no_answers
    own = [impl for impl in hook_caller.get_hookimpls() if impl.plugin_name != DEFAULTS_PLUGIN_NAME]
    if len(own) != 1:
        return _pluggy_call(hook_caller)
    (impl,) = own
    if impl.wrapper or impl.hookwrapper:
        return _pluggy_call(hook_caller)
    ask_policy = _positional_call(impl.function, tuple(impl.argnames))
    if hook not in hookspecs.ANSWER_HOOKS:

        def notify(arguments: dict[str, object]) -> object:
            answer = ask_policy(arguments)
            return [] if answer is None else [answer]

        return notify
    ask_defaults = defaults_caller(getattr(defaults, hook))

    def first_answer(arguments: dict[str, object]) -> object:
        answer = ask_policy(arguments)
        return ask_defaults(arguments) if answer is None else answer

    return first_answer
