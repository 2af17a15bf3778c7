"""llama.cpp's router: ``llama-server --models-dir DIR`` or ``--models-preset FILE`` runs a
llama-server per model (``/props`` says ``role: router``) and forwards each request naming one
(``?model=`` on a read) to it; a read naming a model it has not loaded loads it, unless it
carries ``autoload=false``. The watch reads one model already loaded and never another: the
client adds ``autoload=false`` to every read (``ServerClient.route``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from specwatch.core.redaction import redact_argv
from specwatch.core.server import ROUTER_NOTE
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.server_queries import str_or_none, try_json

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient

ROUTED_STATES = ("loaded", "sleeping")
"""A router's model states whose server answers a read without being loaded, best first."""
MAX_ROUTED = 1024
"""Model cards of a router's ``/v1/models`` read."""
MAX_ARGS, MAX_ARG = 512, 1000
"""Arguments of a routed server's command line kept, and characters of each."""


async def routed_model(client: ServerClient, notes: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """The model of a llama-server router to watch: the address's (``?model=NAME``), else the
    one this client watched before, else the first loaded (else sleeping) one of its
    ``/v1/models``; and the command line the router started its server with (``status.args``,
    secrets withheld; empty if not given). The client's reads then go to it, and
    ``notes[ROUTER_NOTE]`` says which.

    Raises:
        ServerError: The model is not loaded, or none is (``loading``: waited for, as a server
            starting; a request naming a model loads it, a read never does); the address names
            a model the router does not have (HTTP 404).
    """
    listing = await try_json(client, "/v1/models")
    data = listing.get("data") if isinstance(listing, Mapping) else None
    data = data[:MAX_ROUTED] if isinstance(data, list) else []
    states: dict[str, str] = {}  # by id
    known: dict[str, str] = {}  # by id and alias
    args: dict[str, list[Any]] = {}  # the command lines, by id and alias
    for card in data:
        name = str_or_none(card.get("id")) if isinstance(card, Mapping) else None
        if name is None:
            continue
        status = card.get("status")
        status = status if isinstance(status, Mapping) else {}
        state = str(status.get("value"))
        states.setdefault(name, state)
        command = status.get("args")
        command = command if isinstance(command, list) else []
        aliases = card.get("aliases")
        for alias in [name, *(aliases if isinstance(aliases, list) else ())]:
            if isinstance(alias, str):
                known.setdefault(alias, state)
                args.setdefault(alias, command)
    running = [name for want in ROUTED_STATES for name, state in states.items() if state == want]
    # the model watched so far (this client's route) stays the one watched: a graph and a
    # verdict of two models would compare one with the other
    wanted = client.endpoint.model or client.routed
    if wanted is not None:
        if wanted not in known:
            listed = ", ".join(list(states)[:8]) + (" …" if len(states) > 8 else "")
            raise ServerError(
                f"{client.endpoint.url('/v1/models')}: a llama-server router with no model "
                f"{wanted!r} (its models: {listed or 'none'})",
                kind="http",
                status=404,
                url=client.endpoint.url("/v1/models"),
            )
        if known[wanted] not in ROUTED_STATES:
            _not_routable(
                client, f"a llama-server router whose model {wanted!r} is not loaded", "it"
            )
        chosen = wanted
    elif running:
        chosen = running[0]
    else:
        _not_routable(
            client, f"a llama-server router with none of its {len(data)} models loaded", "one"
        )
    client.route = client.routed = chosen
    others = [name for name in running if name != chosen]
    notes[ROUTER_NOTE] = f"a llama-server router: watching {chosen}" + (
        f" (also loaded: {', '.join(others[:8])}{' …' if len(others) > 8 else ''}; "
        "another: host:port?model=NAME)"
        if others
        else ""
    )
    command = args.get(chosen, [])
    return chosen, redact_argv([str(a) for a in command[:MAX_ARGS]], max_arg=MAX_ARG)


def unloaded_reason(model: str, status: int, body: str) -> str | None:
    """Why a read routed to ``model`` failed, when the router says it is not loaded (unloaded
    while watched: by ``POST /models/unload``, or as the least recently used one when another
    load passed ``--models-max``); ``None`` when the answer says something else."""
    if status == 400 and "not loaded" in body.lower():
        return (
            f"the router has unloaded {model}: waiting for it (a request naming it loads it;"
            " specwatch never does)"
        )
    return None


def _not_routable(client: ServerClient, what: str, which: str) -> NoReturn:
    url = client.endpoint.url("/v1/models")
    raise ServerError(
        f"{url}: {what} (a request naming {which} loads it; specwatch never does)",
        kind="http",
        status=503,
        url=url,
    )


__all__ = ["MAX_ROUTED", "ROUTED_STATES", "routed_model", "unloaded_reason"]
