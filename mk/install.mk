# make install, the operations part: systemd units, the example configuration, the operations guide.
# Included by the Makefile; adds itself to `install`. The units name the binary by its installed path. The
# configuration is the admin's once installed: never overwritten.
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
DOCDIR ?= $(PREFIX)/share/doc/spotdrain
OPS_UNITS := $(wildcard systemd/*.service)

.PHONY: install-ops
install: install-ops
install-ops:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	for u in $(OPS_UNITS); do \
		sed -e 's#/usr/local/bin/spotdrain#$(PREFIX)/bin/spotdrain#' \
		    -e 's#/usr/local/share/doc/spotdrain#$(DOCDIR)#' \
		    -e 's#/etc/spotdrain/#$(SYSCONFDIR)/spotdrain/#g' $$u >$(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp && \
		mv $(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	install -m 0644 docs/operations.md $(DESTDIR)$(DOCDIR)/operations.md
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/spotdrain
	[ -e $(DESTDIR)$(SYSCONFDIR)/spotdrain/spotdrain.yaml ] || \
		install -m 0644 systemd/spotdrain.yaml $(DESTDIR)$(SYSCONFDIR)/spotdrain/spotdrain.yaml
