"""ActorAddress: the handle agents use to name and reach each other.

An address carries identity (``agent_id``, ``name``, ``role``) and, while the actor
lives in this process, a reference to it. It is embeddable in pydantic models: it
serializes to its identity only, never to the live reference, so events can be stored
and shown without leaking runtime objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import core_schema

from aklab.errors import ActorGoneError

if TYPE_CHECKING:
    import pykka
    from pydantic import GetCoreSchemaHandler

__all__ = ["ActorAddress"]


class ActorAddress:
    """Identity plus (optionally) a live reference to an actor."""

    __slots__ = ("_proxy", "_ref", "agent_id", "is_user_proxy", "name", "role", "team_id")

    def __init__(
        self,
        agent_id: str,
        name: str,
        role: str,
        *,
        team_id: str = "",
        is_user_proxy: bool = False,
        ref: pykka.ActorRef[Any] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.name = name
        self.role = role
        self.team_id = team_id
        self.is_user_proxy = is_user_proxy
        self._ref = ref
        self._proxy: pykka.ActorProxy[Any] | None = None

    # -- delivery ---------------------------------------------------------------
    @property
    def ref(self) -> pykka.ActorRef[Any]:
        """The live pykka reference; raises ``ActorGoneError`` when there is none."""
        if self._ref is None:
            raise ActorGoneError(f"{self.name} has no live actor in this process")
        return self._ref

    def pykka_proxy(self) -> pykka.ActorProxy[Any]:
        """The actor's pykka proxy, built once per address (pykka looks at every attribute of
        the actor to build one); ``pykka.ActorDeadError`` when the actor is not running."""
        ref = self.ref
        proxy = self._proxy
        if proxy is None or not ref.is_alive():
            proxy = self._proxy = ref.proxy()  # raises ActorDeadError for a stopped actor
        return proxy

    def is_alive(self) -> bool:
        return self._ref is not None and self._ref.is_alive()

    def tell(self, message: Any) -> None:
        """Put ``message`` in the actor's mailbox; ``ActorGoneError`` if it is stopped."""
        import pykka

        try:
            self.ref.tell(message)
        except pykka.ActorDeadError as exc:
            raise ActorGoneError(f"{self.name} ({self.role}) is not running") from exc

    def send(self, recipient: ActorAddress, message: Any, *, timeout: float | None = 30.0) -> None:
        """Have the actor at this address send ``message`` to ``recipient`` (as if it wrote it).

        Returns once the message is on its way (queued for ``recipient``, counted as the
        team's work, recorded as sent), so ``wait_idle`` afterwards waits for its effects.
        """
        import pykka
        from pykka.messages import ProxyCall

        try:
            self.ref.ask(ProxyCall(("send",), (recipient, message), {}), block=False).get(timeout=timeout)
        except pykka.ActorDeadError as exc:
            raise ActorGoneError(f"{self.name} ({self.role}) is not running") from exc

    # -- identity ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "name": self.name,
            "role": self.role,
            "team_id": self.team_id,
            "is_user_proxy": self.is_user_proxy,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorAddress) and other.agent_id == self.agent_id

    def __hash__(self) -> int:
        return hash(self.agent_id)

    def __repr__(self) -> str:
        return f"ActorAddress({self.name!r}, role={self.role!r})"

    # -- pydantic -----------------------------------------------------------------
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def validate(value: Any) -> ActorAddress:
            if isinstance(value, ActorAddress):
                return value
            if isinstance(value, dict):
                return ActorAddress(
                    str(value["agent_id"]),
                    str(value["name"]),
                    str(value.get("role", "")),
                    team_id=str(value.get("team_id", "")),
                    is_user_proxy=bool(value.get("is_user_proxy", False)),
                )
            raise TypeError(f"expected an ActorAddress or a dict, got {type(value).__name__}")

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda a: a.to_dict()),
        )
