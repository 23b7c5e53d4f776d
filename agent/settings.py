"""All configuration, from SWARM_* environment variables or a .env file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

Role = Literal["decomposer", "scorer", "executor", "observer"]
LLMBackendName = Literal["auto", "ollama", "llamacpp", "scripted"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SWARM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # identity and storage
    swarm: str = Field("default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    role: Role | None = None
    name: str | None = Field(None, max_length=64)
    data_dir: Path = Path("data")

    # network
    listen_host: str = "0.0.0.0"
    listen_port: int = Field(0, ge=0, le=65535)
    peers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    mdns: bool = True
    reconnect_interval: float = Field(5.0, gt=0)
    sync_interval: float = Field(10.0, gt=0)
    metrics_port: int = Field(0, ge=0, le=65535, description="0 disables the /metrics endpoint")
    metrics_host: str = "0.0.0.0"

    # logging
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # LLM
    llm: LLMBackendName = "auto"
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "llama3.2:1b"
    llm_timeout: float = Field(120.0, gt=0)
    llm_retries: int = Field(3, ge=0, le=20)
    # an embedded model's name (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b) or a GGUF path;
    # unset: qwen2.5-1.5b when installed, else smollm2-135m (agent.llm.models.resolve)
    llamacpp_model: str | None = None
    model_dir: Path | None = Field(None, description="where split embedded models are assembled")
    llamacpp_threads: int = Field(1, ge=1, le=64)
    llamacpp_ctx: int = Field(2048, ge=256, le=32768)
    scripted_latency: float = Field(0.0, ge=0)

    # plan parameters (carried in the goal event, so every peer folds with the same ones)
    scorers: int = Field(3, ge=1, le=101, description="configured scorer count")
    quorum: int | None = Field(None, ge=1, le=101, description="absolute quorum; default majority")
    max_depth: int = Field(2, ge=0, le=6)
    max_children: int = Field(5, ge=2, le=12)
    max_rounds: int = Field(2, ge=1, le=10)

    # role timing
    strategy: str | None = Field(None, max_length=40)
    collection_window: float = Field(1.5, ge=0)
    round_timeout: float = Field(30.0, gt=0)
    settle_window: float = Field(1.0, ge=0)
    lease_seconds: float = Field(30.0, gt=0)
    max_drift_ms: int = Field(60_000, gt=0)

    @field_validator("llamacpp_model", mode="before")
    @classmethod
    def _model_as_text(cls, v: object) -> object:
        return str(v) if isinstance(v, Path) else v

    @field_validator("peers", mode="before")
    @classmethod
    def _split_peers(cls, v: object) -> object:
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @model_validator(mode="after")
    def _check_quorum(self) -> "Settings":
        if self.quorum is not None and self.quorum > self.scorers:
            raise ValueError(
                f"quorum {self.quorum} exceeds the scorer count {self.scorers}: no split could pass"
            )
        return self

    @property
    def effective_quorum(self) -> int:
        return self.quorum if self.quorum is not None else self.scorers // 2 + 1


class SettingsError(RuntimeError):
    """Configuration is invalid; the message names every bad field."""


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            env = f"SWARM_{loc.upper()}" if err["loc"] else "settings"
            lines.append(f"  {env}: {err['msg']}")
        raise SettingsError("invalid configuration:\n" + "\n".join(lines)) from None
