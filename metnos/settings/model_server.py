"""``[model]``: the embedded model's shared warm server (metnos.mechanisms.llm.shared_server), and where
models beside Metnos's own come from (``metnos model install --hf``, ``--model ollama:NAME``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

from metnos.settings.declare import setting
from metnos.settings.http_address import http_url

DEFAULT_IDLE_S = 600.0
ENV_IDLE = "METNOS_MODEL_IDLE_S"
# Hugging Face's and Ollama's own variables, as their tools read them.
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
ENV_HF_ENDPOINT = "HF_ENDPOINT"
ENV_HF_TOKEN = "HF_TOKEN"
DEFAULT_HF_TOKEN_FILE = "~/.cache/huggingface/token"
ENV_HF_TOKEN_FILE = "HF_TOKEN_PATH"
DEFAULT_OLLAMA_MODELS = "~/.ollama/models"
ENV_OLLAMA_MODELS = "OLLAMA_MODELS"


class ModelServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    idle_s: float = setting(DEFAULT_IDLE_S, "Seconds the embedded model's warm server outlives its last use "
                                            "(0: each command starts and stops its own; at most 604800).",
                            env=ENV_IDLE, ge=0, le=7 * 24 * 3600, allow_inf_nan=False)
    hf_endpoint: str = setting(DEFAULT_HF_ENDPOINT, "Where `metnos model install --hf REPO FILE` downloads from: "
                                                    "`{hf_endpoint}/{REPO}/resolve/{revision}/{FILE}` (a mirror, or a local server).",
                               env=ENV_HF_ENDPOINT)
    hf_token: str | None = setting(None, "A Hugging Face access token, for a repository that needs one; sent to "
                                         "hf_endpoint only, never shown.", env=ENV_HF_TOKEN, toml=False, secret=True)
    hf_token_file: str = setting(DEFAULT_HF_TOKEN_FILE, "The file holding the access token when HF_TOKEN is not set "
                                                        "(where `huggingface-cli login` saves it).", env=ENV_HF_TOKEN_FILE)
    ollama_models: str = setting(DEFAULT_OLLAMA_MODELS, "Ollama's models folder, where `--model ollama:NAME[:TAG]` "
                                                        "finds a model's GGUF (manifests/ and blobs/).", env=ENV_OLLAMA_MODELS)

    @field_validator("hf_endpoint")
    @classmethod
    def _an_http_url(cls, v: str) -> str:
        return http_url(v.strip())
