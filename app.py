"""Start the raqa demo: `python app.py` (Hugging Face Spaces runs this file).

Configuration comes from the environment: RAQA_CORPUS, RAQA_MODEL, RAQA_ADAPTER, RAQA_CACHE
(see raqa/config.py); with none set, the embedded Wikipedia pages and SmolLM2-135M are used.
"""

import os

from raqa.config import AppConfig
from raqa.service import Service
from raqa.ui import launch

if __name__ == "__main__":
    service = Service.load(AppConfig.from_env())
    launch(
        service,
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("PORT", "7860")),
    )
