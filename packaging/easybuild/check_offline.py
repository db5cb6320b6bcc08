"""Offline check of the easyconfig with EasyBuild's own parser, validator and style check (no
Lmod here, so a no-op modules tool is patched in; nothing is fetched or built). Run in a throwaway
venv: python3 -m venv /tmp/eb && /tmp/eb/bin/pip install easybuild-framework easybuild-easyblocks
pycodestyle && PATH=/tmp/eb/bin:$PATH /tmp/eb/bin/python packaging/easybuild/check_offline.py
packaging/easybuild/HMB-0.1.0-foss-2023a.eb"""
import sys
from easybuild.tools.options import set_up_configuration
set_up_configuration(args=['--allow-use-as-root-and-accept-consequences', '--prefix=/tmp/hmb-eb-check'], silent=True)
import easybuild.tools.modules as m
import easybuild.framework.easyconfig.easyconfig as ecmod
ecmod.modules_tool = lambda *a, **k: m.NoModulesTool(testing=True)   # no Lmod here: offline check only
from easybuild.framework.easyconfig.style import check_easyconfigs_style
from easybuild.framework.easyconfig.easyconfig import EasyConfig, get_easyblock_class
from easybuild.framework.easyconfig.parser import EasyConfigParser
path = sys.argv[1]
print("style problems:", check_easyconfigs_style([path]))
p = EasyConfigParser(path)
print("parsed keys:", sorted(p.get_config_dict().keys()))
ec = EasyConfig(path, validate=True)
print("name/version/toolchain:", ec['name'], ec['version'], ec['toolchain'])
print("easyblock class:", get_easyblock_class(ec['easyblock']))
print("sanity:", ec['sanity_check_paths'], ec['sanity_check_commands'])
print("configopts:", ec['configopts'])
print("sources:", ec['sources'])
